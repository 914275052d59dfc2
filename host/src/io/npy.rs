//! .npy files: every .npy the project writes (float32 and float64, C order, through a temporary
//! file renamed into place), the headers of files several writers fill, and .npy input (float
//! arrays in either byte order and memory order, integer and bool masks), through the `npyz` crate.

use std::io::BufReader;
use std::path::Path;

use anyhow::{bail, Context};
use npyz::{AutoSerialize, DType, Order, TypeChar, WriterBuilder};

use super::AtomicFile;

/// Writes `data` (C order: the last axis fastest) with `shape` as a little-endian `<f4` .npy
/// file, through a temporary file renamed into place.
pub fn write_npy(path: impl AsRef<Path>, data: &[f32], shape: &[u64]) -> anyhow::Result<()> { write(path.as_ref(), data, shape, "<f4") }

/// [`write_npy`] for float64 values (`<f8`).
pub fn write_npy_f64(path: impl AsRef<Path>, data: &[f64], shape: &[u64]) -> anyhow::Result<()> { write(path.as_ref(), data, shape, "<f8") }

fn write<T: AutoSerialize + Copy>(path: &Path, data: &[T], shape: &[u64], descr: &str) -> anyhow::Result<()> {
    let n: u64 = shape.iter().product();
    if n != data.len() as u64 {
        bail!("{}: shape {shape:?} holds {n} values but {} were given", path.display(), data.len());
    }
    let mut file = AtomicFile::create(path)?;
    {
        let mut w = npyz::WriteOptions::<T>::new()
            .dtype(DType::Plain(descr.parse().expect("valid type string")))
            .shape(shape)
            .writer(&mut file)
            .begin_nd()
            .with_context(|| format!("{}: cannot write the .npy header", path.display()))?;
        w.extend(data.iter().copied()).with_context(|| format!("{}: write failed", path.display()))?;
        w.finish().with_context(|| format!("{}: write failed", path.display()))?;
    }
    file.commit().with_context(|| format!("{}: cannot finish the file", path.display()))
}

/// The header of a C-order .npy file of `shape` and dtype `descr` (`<f4`, `<f8`, ...; format 1.0,
/// padded so the data start at a multiple of 64 bytes), for files whose data several writers put
/// in place (`crate::exec::mpi::write_shares`).
pub fn header(shape: &[usize], descr: &str) -> Vec<u8> {
    // Written as npyz writes it (`(2, 3, 4, )`), so a file written in pieces and one written by
    // [`write_npy`] are the same bytes.
    let dims: String = shape.iter().map(|d| format!("{d}, ")).collect();
    let mut dict = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': ({dims}), }}");
    while (10 + dict.len() + 1) % 64 != 0 {
        dict.push(' ');
    }
    dict.push('\n');
    let mut h = b"\x93NUMPY\x01\x00".to_vec();
    h.extend((dict.len() as u16).to_le_bytes());
    h.extend(dict.as_bytes());
    h
}

/// [`header`] of a float32 array.
pub fn header_f32(shape: &[usize]) -> Vec<u8> { header(shape, "<f4") }

/// What a .npy header says: where the data start, the shape, the dtype string and the order.
#[derive(Debug, Clone, PartialEq)]
pub struct Head {
    pub data_at: usize,
    pub shape: Vec<usize>,
    /// The dtype string, e.g. `<f4`, `>f8`, `|u1`.
    pub descr: String,
    pub fortran: bool,
}

impl Head {
    /// (bytes per value, big-endian) of a float32 or float64 array; any other dtype is an error
    /// naming `path`.
    pub fn float(&self, path: &Path) -> anyhow::Result<(usize, bool)> {
        let (order, kind) = self.descr.split_at(self.descr.len().min(1));
        match (order, kind) {
            ("<" | "=" | ">", "f4") => Ok((4, order == ">")),
            ("<" | "=" | ">", "f8") => Ok((8, order == ">")),
            _ => crate::bail_input!("{}: dtype {} is not supported (expected float32 or float64)", path.display(), self.descr),
        }
    }
}

/// Opens `path` and reads its header ([`Head`]), with the checks of [`check_complete`]; the file
/// is left at the start of the data.
pub fn open(path: &Path) -> anyhow::Result<(std::fs::File, Head)> { head(path) }

/// Reads the header of `path` (any dtype) and checks that the file holds every value it
/// announces: a short file is an error naming the file and saying it is truncated (rather than
/// the I/O layer's "failed to fill whole buffer" once the reading runs off its end).
fn head(path: &Path) -> anyhow::Result<(std::fs::File, Head)> {
    use std::io::{Read, Seek, SeekFrom};
    let mut f = std::fs::File::open(path).with_context(|| format!("cannot read {}", path.display()))?;
    let len = f.metadata().with_context(|| format!("cannot read {}", path.display()))?.len();
    // The header: magic, version, header length (u16 in format 1, u32 in 2 and 3), dictionary.
    let mut pre = [0u8; 12];
    let got = f.read(&mut pre).with_context(|| format!("cannot read {}", path.display()))?;
    if got < 10 || &pre[..6] != b"\x93NUMPY" {
        crate::bail_input!("{} is not a .npy file{}", path.display(), if got < 10 { format!(" ({len} bytes)") } else { String::new() });
    }
    let data_at = match pre[6] {
        1 => 10 + u16::from_le_bytes([pre[8], pre[9]]) as usize,
        2 | 3 if got == 12 => 12 + u32::from_le_bytes([pre[8], pre[9], pre[10], pre[11]]) as usize,
        v => crate::bail_input!("{}: .npy format version {v}", path.display()),
    };
    if len < data_at as u64 {
        crate::bail_input!("{}: truncated .npy file: {len} bytes, shorter than its {data_at}-byte header", path.display());
    }
    let mut bytes = vec![0u8; data_at];
    f.seek(SeekFrom::Start(0))?;
    f.read_exact(&mut bytes).with_context(|| format!("{}: truncated .npy header", path.display()))?;
    let npy = npyz::NpyFile::new(&bytes[..]).map_err(|e| crate::error::malformed(e, format!("{} is not a .npy file", path.display())))?;
    let shape: Vec<usize> = npy.shape().iter().map(|&d| d as usize).collect();
    let descr = npy.dtype().descr().trim_matches(|c| c == '\'' || c == '"').to_string();
    let item = descr.trim_start_matches(|c: char| !c.is_ascii_digit()).parse::<u64>().unwrap_or(0);
    let need = shape.iter().try_fold(item, |a, &d| a.checked_mul(d as u64)).and_then(|b| b.checked_add(data_at as u64));
    let Some(need) = need else { crate::bail_input!("{}: the header's shape {shape:?} of {descr} overflows", path.display()) };
    if len < need {
        crate::bail_input!("{}: truncated .npy file: {len} bytes, its header's shape {shape:?} of {descr} needs {need}", path.display());
    }
    f.seek(SeekFrom::Start(data_at as u64))?;
    Ok((f, Head { data_at, shape, descr, fortran: npy.order() == npyz::Order::Fortran }))
}

/// Rows `rows` along the first axis of an f32 (or f64, converted) little-endian C-order array,
/// read from their place in the file alone (an MPI rank's traces, or its slab of a volume);
/// returns (shape, values of those rows). The file's length is checked against its header.
pub fn read_rows_f32(path: &Path, rows: std::ops::Range<usize>) -> anyhow::Result<(Vec<usize>, Vec<f32>)> {
    read_rows(path, Some(rows))
}

/// The whole of an f32 (or f64, converted) little-endian C-order array: (shape, values). Errors
/// name the file: not a .npy file, truncated, another dtype, Fortran order.
pub fn read_f32(path: &Path) -> anyhow::Result<(Vec<usize>, Vec<f32>)> { read_rows(path, None) }

fn read_rows(path: &Path, rows: Option<std::ops::Range<usize>>) -> anyhow::Result<(Vec<usize>, Vec<f32>)> {
    use std::io::{Read, Seek, SeekFrom};
    let (mut f, h) = head(path)?;
    if h.fortran {
        crate::bail_input!("{}: Fortran-order arrays are not supported (save with numpy's default C order)", path.display());
    }
    let shape = h.shape;
    let (n, width) = match shape.split_first() {
        Some((&n, rest)) => (n, rest.iter().product::<usize>()),
        None if rows.is_none() => (1, 1),
        None => crate::bail_input!("{}: a 0-D array has no rows", path.display()),
    };
    let rows = rows.unwrap_or(0..n);
    if rows.end > n {
        bail!("{}: rows {rows:?} of {n}", path.display());
    }
    let size = match h.descr.as_str() {
        "<f4" => 4,
        "<f8" => 8,
        d => crate::bail_input!("{}: dtype {d} is not little-endian float32 or float64", path.display()),
    };
    f.seek(SeekFrom::Start((h.data_at + rows.start * width * size) as u64))?;
    let mut bytes = vec![0u8; rows.len() * width * size];
    f.read_exact(&mut bytes).with_context(|| format!("reading rows {rows:?} of {}", path.display()))?;
    let values = if size == 4 {
        bytes.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect()
    } else {
        bytes.chunks_exact(8).map(|b| f64::from_le_bytes(b.try_into().expect("8 bytes")) as f32).collect()
    };
    Ok((shape, values))
}

/// Checks that `path` is a .npy file holding every value its header announces (any dtype); the
/// error names the file and says it is truncated.
pub fn check_complete(path: &Path) -> anyhow::Result<()> { head(path).map(|_| ()) }

/// Every value of a .npy array of float, integer or bool values (little-endian, C order), as f32:
/// trace masks. Errors name the file.
pub fn read_any_f32(path: &Path) -> anyhow::Result<Vec<f32>> {
    check_complete(path)?;
    let bytes = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
    let npy = npyz::NpyFile::new(&bytes[..]).map_err(|e| crate::error::malformed(e, format!("{} is not a .npy file", path.display())))?;
    let what = || format!("{}: cannot read the data", path.display());
    Ok(match npy.dtype().descr().trim_matches(|c| c == '\'' || c == '"') {
        "<f4" => npy.into_vec::<f32>().map_err(|e| crate::error::malformed(e, what()))?,
        "<f8" => npy.into_vec::<f64>().map_err(|e| crate::error::malformed(e, what()))?.into_iter().map(|v| v as f32).collect(),
        "|u1" | "|b1" => npy.into_vec::<u8>().map_err(|e| crate::error::malformed(e, what()))?.into_iter().map(|v| v as f32).collect(),
        "<i4" => npy.into_vec::<i32>().map_err(|e| crate::error::malformed(e, what()))?.into_iter().map(|v| v as f32).collect(),
        "<i8" => npy.into_vec::<i64>().map_err(|e| crate::error::malformed(e, what()))?.into_iter().map(|v| v as f32).collect(),
        other => crate::bail_input!("{}: dtype {other} (expected float, int or bool)", path.display()),
    })
}

/// An array read from a .npy file, in C order (the last axis fastest).
#[derive(Debug, Clone, PartialEq)]
pub struct NpyArray {
    pub shape: Vec<u64>,
    pub data: Vec<f32>,
}

/// Reads a .npy array of `f4` or `f8` values (either byte order, C or Fortran order; f8 values are
/// rounded to f32) into C order. Non-finite values, values outside the f32 range, other dtypes
/// and truncated files are errors naming the file.
pub fn read_npy_f32(path: impl AsRef<Path>) -> anyhow::Result<NpyArray> {
    let path = path.as_ref();
    let what = || path.display().to_string();
    check_complete(path)?;
    let file = std::fs::File::open(path).with_context(|| format!("{}: cannot open", what()))?;
    let npy = npyz::NpyFile::new(BufReader::new(file)).map_err(|e| crate::error::malformed(e, format!("{}: not a .npy file", what())))?;
    let shape = npy.shape().to_vec();
    let order = npy.order();
    let size = match npy.dtype() {
        DType::Plain(ts) if ts.type_char() == TypeChar::Float && matches!(ts.size_field(), 4 | 8) => ts.size_field(),
        d => crate::bail_input!("{}: dtype {} is not supported (expected float32 or float64)", what(), d.descr()),
    };
    let data: Vec<f32> = if size == 4 {
        npy.into_vec::<f32>().map_err(|e| crate::error::malformed(e, format!("{}: cannot read the data (truncated?)", what())))?
    } else {
        let v = npy.into_vec::<f64>().map_err(|e| crate::error::malformed(e, format!("{}: cannot read the data (truncated?)", what())))?;
        if let Some(i) = v.iter().position(|x| x.is_finite() && x.abs() > f32::MAX as f64) {
            crate::bail_input!("{}: value {} at flat index {i} is outside the f32 range", what(), v[i]);
        }
        v.into_iter().map(|x| x as f32).collect()
    };
    if let Some(i) = data.iter().position(|x| !x.is_finite()) {
        crate::bail_input!("{}: value at flat index {i} is not finite ({})", what(), data[i]);
    }
    let data = if order == Order::Fortran && shape.len() > 1 { fortran_to_c(&data, &shape) } else { data };
    Ok(NpyArray { shape, data })
}

/// Reorders a Fortran-order (first axis fastest) array into C order.
fn fortran_to_c(data: &[f32], shape: &[u64]) -> Vec<f32> {
    let dims: Vec<usize> = shape.iter().map(|&d| d as usize).collect();
    // Fortran strides: the first axis has stride 1.
    let mut fstride = vec![1usize; dims.len()];
    for k in 1..dims.len() {
        fstride[k] = fstride[k - 1] * dims[k - 1];
    }
    let mut out = Vec::with_capacity(data.len());
    let mut idx = vec![0usize; dims.len()];
    for _ in 0..data.len() {
        out.push(data[idx.iter().zip(&fstride).map(|(i, s)| i * s).sum::<usize>()]);
        // Advance the C-order multi-index (last axis fastest).
        for k in (0..dims.len()).rev() {
            idx[k] += 1;
            if idx[k] < dims[k] {
                break;
            }
            idx[k] = 0;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmp(name: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("seisgpu-npy-unit-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir.join(name)
    }

    #[test]
    fn round_trip_and_numpy_header() {
        let p = tmp("a.npy");
        let data: Vec<f32> = (0..24).map(|i| i as f32 * 0.5 - 3.0).collect();
        write_npy(&p, &data, &[2, 3, 4]).unwrap();
        let bytes = std::fs::read(&p).unwrap();
        assert_eq!(&bytes[..6], b"\x93NUMPY");
        let header = String::from_utf8_lossy(&bytes[10..80]);
        assert!(header.contains("'descr': '<f4'") && header.contains("(2, 3, 4, )"), "{header}");
        let a = read_npy_f32(&p).unwrap();
        assert_eq!((a.shape, a.data), (vec![2, 3, 4], data));
    }

    #[test]
    fn the_share_header_is_that_of_one_process() {
        for shape in [vec![7usize], vec![2, 3, 5], vec![70, 45, 90], vec![1, 4, 1, 9]] {
            let n: usize = shape.iter().product();
            let p = tmp(&format!("h{}.npy", shape.len()));
            write_npy(&p, &vec![1.0; n], &shape.iter().map(|&d| d as u64).collect::<Vec<_>>()).unwrap();
            let head = header_f32(&shape);
            assert_eq!(&std::fs::read(&p).unwrap()[..head.len()], &head[..], "{shape:?}");
            write_npy_f64(&p, &vec![1.0; n], &shape.iter().map(|&d| d as u64).collect::<Vec<_>>()).unwrap();
            let head = header(&shape, "<f8");
            let bytes = std::fs::read(&p).unwrap();
            assert_eq!(&bytes[..head.len()], &head[..], "{shape:?}");
            assert_eq!(bytes.len(), head.len() + 8 * n);
        }
    }

    #[test]
    fn masks_of_any_dtype_read_as_values() {
        let p = tmp("mask.npy");
        for (descr, body) in [("|u1", vec![0u8, 1, 0, 2]), ("<i4", [0i32, 1, 0, -3].iter().flat_map(|v| v.to_le_bytes()).collect())] {
            let mut bytes = header(&[2, 2], descr);
            bytes.extend(&body);
            std::fs::write(&p, &bytes).unwrap();
            let v = read_any_f32(&p).unwrap();
            assert_eq!(v.iter().map(|&x| x != 0.0).collect::<Vec<_>>(), [false, true, false, true], "{descr}");
        }
        let mut bytes = header(&[2, 2], "<c8");
        bytes.extend([0u8; 32]);
        std::fs::write(&p, &bytes).unwrap();
        let e = read_any_f32(&p).unwrap_err().to_string();
        assert!(e.contains("mask.npy") && e.contains("<c8"), "{e}");
        std::fs::write(&p, &header(&[2, 2], "|u1")).unwrap();
        let e = read_any_f32(&p).unwrap_err().to_string();
        assert!(e.contains("mask.npy") && e.contains("truncated"), "{e}");
    }

    #[test]
    fn the_header_gives_the_float_layout_and_refuses_other_dtypes() {
        let p = tmp("layout.npy");
        for (descr, want) in [("<f4", Some((4, false))), (">f8", Some((8, true))), ("<i4", None), ("|u1", None)] {
            let mut bytes = header(&[3], descr);
            bytes.extend([0u8; 24]);
            std::fs::write(&p, &bytes).unwrap();
            let (_, h) = open(&p).unwrap();
            assert_eq!((h.shape.as_slice(), h.data_at), (&[3usize][..], header(&[3], descr).len()));
            match want {
                Some(w) => assert_eq!(h.float(&p).unwrap(), w, "{descr}"),
                None => assert!(h.float(&p).unwrap_err().to_string().contains(descr), "{descr}"),
            }
        }
        // A shape whose byte count overflows is an error, not a wrapped length.
        std::fs::write(&p, header(&[1 << 40, 1 << 40], "<f8")).unwrap();
        assert!(open(&p).unwrap_err().to_string().contains("overflows"));
    }

    #[test]
    fn a_header_and_data_written_in_pieces_read_back() {
        for shape in [vec![7usize], vec![2, 3, 5], vec![1, 4, 1, 9]] {
            let n: usize = shape.iter().product();
            let data: Vec<f32> = (0..n).map(|i| (i as f32).sin() * 40.0).collect();
            let mut bytes = header_f32(&shape);
            assert_eq!(bytes.len() % 64, 0);
            // The data from two writers, second half first.
            let body: Vec<u8> = data.iter().flat_map(|v| v.to_le_bytes()).collect();
            let (h, half) = (bytes.len(), body.len() / 8 * 4);
            bytes.resize(h + body.len(), 0);
            bytes[h + half..].copy_from_slice(&body[half..]);
            bytes[h..h + half].copy_from_slice(&body[..half]);
            let p = tmp(&format!("pieces-{}.npy", shape.len()));
            std::fs::write(&p, &bytes).unwrap();
            let a = read_npy_f32(&p).unwrap();
            assert_eq!(a.shape, shape.iter().map(|&d| d as u64).collect::<Vec<_>>());
            assert_eq!(a.data, data);
        }
    }

    #[test]
    fn rows_read_from_their_place() {
        let p = tmp("rows.npy");
        let data: Vec<f32> = (0..24).map(|i| i as f32 * 0.5 - 3.0).collect();
        write_npy(&p, &data, &[6, 4]).unwrap();
        for rows in [0..1, 2..5, 6..6] {
            let (shape, got) = read_rows_f32(&p, rows.clone()).unwrap();
            assert_eq!((shape, got), (vec![6, 4], data[rows.start * 4..rows.end * 4].to_vec()));
        }
        assert!(read_rows_f32(&p, 5..7).is_err());
        let bytes = std::fs::read(&p).unwrap();
        std::fs::write(&p, &bytes[..bytes.len() - 4]).unwrap();
        let e = read_rows_f32(&p, 0..1).unwrap_err().to_string();
        assert!(e.contains("rows.npy") && e.contains("truncated") && e.contains("need"), "{e}");
        // A 3D array: rows along the first axis.
        write_npy(&p, &data, &[3, 2, 4]).unwrap();
        assert_eq!(read_rows_f32(&p, 1..3).unwrap(), (vec![3, 2, 4], data[8..].to_vec()));
    }

    #[test]
    fn shape_mismatch_and_bad_files_are_errors() {
        let p = tmp("b.npy");
        let e = write_npy(&p, &[1.0; 5], &[2, 3]).unwrap_err().to_string();
        assert!(e.contains("b.npy") && e.contains("6 values but 5"), "{e}");
        std::fs::write(&p, b"not numpy").unwrap();
        let e = format!("{:#}", read_npy_f32(&p).unwrap_err());
        assert!(e.contains("b.npy") && e.contains("not a .npy file"), "{e}");
    }

    #[test]
    fn reads_f8_big_endian_fortran_order() {
        // Hand-made: '>f8', fortran_order True, shape (2, 3): column-major values.
        let mut header = "{'descr': '>f8', 'fortran_order': True, 'shape': (2, 3), }".to_string();
        while !(10 + header.len() + 1).is_multiple_of(64) {
            header.push(' ');
        }
        header.push('\n');
        let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
        bytes.extend_from_slice(&(header.len() as u16).to_le_bytes());
        bytes.extend_from_slice(header.as_bytes());
        // C-order matrix [[1, 2, 3], [4, 5, 6]] stored column by column.
        for v in [1.0f64, 4.0, 2.0, 5.0, 3.0, 6.0] {
            bytes.extend_from_slice(&v.to_be_bytes());
        }
        let p = tmp("c.npy");
        std::fs::write(&p, &bytes).unwrap();
        let a = read_npy_f32(&p).unwrap();
        assert_eq!(a.shape, vec![2, 3]);
        assert_eq!(a.data, vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
        // Truncate the data: an error, not a short array.
        std::fs::write(&p, &bytes[..bytes.len() - 4]).unwrap();
        let e = read_npy_f32(&p).unwrap_err().to_string();
        assert!(e.contains("c.npy") && e.contains("truncated"), "{e}");
        // Cut inside the header too.
        std::fs::write(&p, &bytes[..40]).unwrap();
        let e = read_npy_f32(&p).unwrap_err().to_string();
        assert!(e.contains("c.npy") && e.contains("truncated"), "{e}");
    }

    #[test]
    fn non_finite_input_is_refused() {
        let p = tmp("d.npy");
        write_npy(&p, &[1.0, f32::NAN, 2.0], &[3]).unwrap();
        let e = read_npy_f32(&p).unwrap_err().to_string();
        assert!(e.contains("flat index 1"), "{e}");
    }
}
